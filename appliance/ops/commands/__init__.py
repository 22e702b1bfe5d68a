"""The bodies of the operations commands (``backup``, ``restore``, ``migrate``,
``doctor``, ``config check``); :mod:`appliance.cli` declares them."""
