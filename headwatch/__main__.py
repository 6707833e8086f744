from headwatch.cli import main

raise SystemExit(main())
