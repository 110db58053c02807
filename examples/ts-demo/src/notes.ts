// The notes the service serves: kept in memory, in the order they were added.
export interface Note {
  id: string;
  title: string;
  body: string;
}

const NOTES: Note[] = [
  { id: "1", title: "Groceries", body: "eggs, flour and a lemon" },
  { id: "2", title: "Ideas", body: "a router that two agents can edit at once" },
];

export function listNotes(): Note[] {
  return [...NOTES];
}

export function findNote(id: string): Note | undefined {
  return NOTES.find((note) => note.id === id);
}
