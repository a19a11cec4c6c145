from ksi.cli import main

main()
