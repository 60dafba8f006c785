from threadloom.entry import main

main()
