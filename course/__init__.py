"""What a lesson page is made of: the lesson scaffold, URL-bound state, translations, text
and token helpers, the chart theme, the course map, the session's model, the cached
computations pages share (course/cache.py) and "What to notice" (course/notices/).
See docs/DESIGN.md."""
