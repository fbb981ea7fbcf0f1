from llmcalc.cli import main

if __name__ == "__main__":  # not when a spawned process (llmcalc calibrate's collectives) imports it
    main()
