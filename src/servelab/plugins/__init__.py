"""What a plug-in is: the bases every app server, front and load driver module implements
(``server.AppServer``, ``front.Front``, ``driver.LoadDriver``), and each kind's typed lookup
by name (``get_server``, ``get_front``, ``get_driver``) over the tables in
``servelab.registry``. The plug-ins themselves live in servers/, fronts/ and load/."""
