from dswheels.cli import main

raise SystemExit(main())
