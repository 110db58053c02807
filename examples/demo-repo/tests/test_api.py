import unittest

from api import App, Response, create_app
from store import BookmarkStore


class ApiTest(unittest.TestCase):
    def setUp(self):
        self.app = create_app()

    def post(self, url="https://example.com", title="Example", tags=()):
        body = {"url": url, "title": title, "tags": list(tags)}
        return self.app.handle("POST", "/bookmarks", body)

    def test_create_then_fetch_a_bookmark(self):
        created = self.post(tags=["python"])
        self.assertEqual(created.status, 201)
        fetched = self.app.handle("GET", f"/bookmarks/{created.body['id']}")
        self.assertEqual((fetched.status, fetched.body), (200, created.body))

    def test_list_returns_every_bookmark(self):
        self.post(title="One")
        self.post(title="Two")
        response = self.app.handle("GET", "/bookmarks")
        self.assertEqual([b["title"] for b in response.body], ["One", "Two"])

    def test_invalid_input_is_a_400(self):
        self.assertEqual(self.post(url="nope").status, 400)

    def test_missing_or_malformed_id_is_a_404(self):
        self.assertEqual(self.app.handle("GET", "/bookmarks/99").status, 404)
        self.assertEqual(self.app.handle("GET", "/bookmarks/abc").status, 404)

    def test_unknown_path_is_a_404_and_wrong_method_a_405(self):
        self.assertEqual(self.app.handle("GET", "/nowhere").status, 404)
        self.assertEqual(self.app.handle("PUT", "/bookmarks").status, 405)

    def test_middleware_runs_outermost_first(self):
        seen = []

        def tracer(name):
            def middleware(request, call_next):
                seen.append(name)
                return call_next(request)
            return middleware

        app = App(BookmarkStore())
        app.add_middleware(tracer("outer"))
        app.add_middleware(tracer("inner"))
        self.assertIsInstance(app.handle("GET", "/bookmarks"), Response)
        self.assertEqual(seen, ["outer", "inner"])


if __name__ == "__main__":
    unittest.main()
