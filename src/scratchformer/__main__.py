import sys

from scratchformer.app.cli import main

sys.exit(main())
