from groundwire.app.cli import main

raise SystemExit(main())
