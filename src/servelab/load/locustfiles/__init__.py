"""Files servelab hands to Locust with ``-f``: its built-in scenarios and the hooks that
run beside every scenario (the user's too). Loaded by Locust only, never imported by
servelab itself (Locust is an optional dependency)."""
