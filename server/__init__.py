"""The process, not the page: start-up (serve, warm-up), the models and run cache every session
shares, script slots, the training queue, and the heap. See docs/DESIGN.md."""
