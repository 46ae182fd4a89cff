from convbench.cli.main import main

raise SystemExit(main())
