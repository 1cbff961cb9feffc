from psched.cli.main import main

raise SystemExit(main())
