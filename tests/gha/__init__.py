"""Local GitHub Actions: the dry run of the workflows, their expression language, and their linters."""
