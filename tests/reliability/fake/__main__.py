from tests.reliability.fake.cli import main

raise SystemExit(main())
