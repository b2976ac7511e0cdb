from safelife_rl.apps.reproduce.cli import main

main()
