"""Your real traffic: access logs read as a stream of requests (``reading``, ``formats``),
grouped into routes and described (``routes``, ``describe``), turned into a replay
schedule (``schedule``), and synthetic logs for the built-in apps (``synthetic``)."""
