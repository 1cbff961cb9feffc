from psched.cli import main

raise SystemExit(main())
