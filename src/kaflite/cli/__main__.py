from kaflite.cli import main

main()
