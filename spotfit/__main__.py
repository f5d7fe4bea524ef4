from spotfit.cli import main

main()
