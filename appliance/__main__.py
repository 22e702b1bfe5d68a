from appliance.cli import main

if __name__ == "__main__":  # a spawned import parser imports this module too
    main()
