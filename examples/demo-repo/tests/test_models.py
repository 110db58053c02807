import unittest

from models import Bookmark, ValidationError, validate_title, validate_url


class ValidateUrlTest(unittest.TestCase):
    def test_accepts_http_and_https(self):
        self.assertEqual(validate_url(" https://example.com/a "), "https://example.com/a")
        self.assertEqual(validate_url("http://example.com"), "http://example.com")

    def test_rejects_other_schemes_and_relative_urls(self):
        for bad in ("ftp://example.com", "example.com", "/just/a/path", ""):
            with self.subTest(url=bad), self.assertRaises(ValidationError):
                validate_url(bad)


class ValidateTitleTest(unittest.TestCase):
    def test_strips_whitespace(self):
        self.assertEqual(validate_title("  Docs  "), "Docs")

    def test_rejects_empty_and_overlong_titles(self):
        for bad in ("", "   ", "x" * 201):
            with self.subTest(title=bad[:10]), self.assertRaises(ValidationError):
                validate_title(bad)


class BookmarkTest(unittest.TestCase):
    def test_to_dict_lists_tags(self):
        bookmark = Bookmark(1, "https://example.com", "Example", ("python",))
        self.assertEqual(
            bookmark.to_dict(),
            {"id": 1, "url": "https://example.com", "title": "Example", "tags": ["python"]},
        )


if __name__ == "__main__":
    unittest.main()
