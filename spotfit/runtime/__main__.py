from spotfit.runtime.main import main

main()
