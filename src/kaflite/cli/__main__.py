import sys

from kaflite.cli import main

sys.exit(main())
