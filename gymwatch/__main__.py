from gymwatch.cli import main

raise SystemExit(main())
