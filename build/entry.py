"""The frozen executable's entry point: the same click CLI as ``appliance``."""

from appliance.cli import main

if __name__ == "__main__":
    main()
