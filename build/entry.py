"""The frozen executable's entry point: the same click CLI as ``appliance``."""

import multiprocessing

from appliance.cli import main

if __name__ == "__main__":
    # The import parser runs in a spawned process: in the frozen binary that process is
    # this executable again, which freeze_support turns into the child.
    multiprocessing.freeze_support()
    main()
