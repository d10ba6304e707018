"""What searches leave behind: the database, its studies, and reading, reporting, exporting and importing them."""
