import unittest

from models import ValidationError
from store import BookmarkStore, NotFound


class BookmarkStoreTest(unittest.TestCase):
    def setUp(self):
        self.store = BookmarkStore()

    def test_add_assigns_increasing_ids(self):
        first = self.store.add("https://a.example", "A")
        second = self.store.add("https://b.example", "B", ["docs"])
        self.assertEqual((first.id, second.id), (1, 2))
        self.assertEqual(second.tags, ("docs",))
        self.assertEqual(len(self.store), 2)

    def test_add_rejects_invalid_values_and_keeps_nothing(self):
        with self.assertRaises(ValidationError):
            self.store.add("not a url", "A")
        self.assertEqual(len(self.store), 0)

    def test_get_missing_id_raises_not_found(self):
        with self.assertRaises(NotFound):
            self.store.get(42)

    def test_list_is_oldest_first(self):
        self.store.add("https://a.example", "A")
        self.store.add("https://b.example", "B")
        self.assertEqual([b.title for b in self.store.list_bookmarks()], ["A", "B"])

    def test_update_replaces_only_given_fields(self):
        bookmark = self.store.add("https://a.example", "A", ["old"])
        updated = self.store.update(bookmark.id, tags=["new"])
        self.assertEqual((updated.title, updated.tags), ("A", ("new",)))
        self.assertEqual(self.store.get(bookmark.id), updated)

    def test_delete_removes_and_never_reuses_the_id(self):
        bookmark = self.store.add("https://a.example", "A")
        self.store.delete(bookmark.id)
        with self.assertRaises(NotFound):
            self.store.delete(bookmark.id)
        self.assertEqual(self.store.add("https://b.example", "B").id, 2)


if __name__ == "__main__":
    unittest.main()
