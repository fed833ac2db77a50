import sys

from loader.cli import main

sys.exit(main())
