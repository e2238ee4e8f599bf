"""Request handlers, one module per API (``kNN_name.py``), each registering itself with
``moldau.broker.registry.handler``. Importing this package imports none of them: the router loads a module on
the first request of its API (``moldau.broker.registry.load_handler``, from the table ``SERVED``);
``moldau.broker.registry.load_all()`` loads them all."""
