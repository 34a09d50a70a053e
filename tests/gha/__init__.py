"""The workflows as GitHub reads them: their expression language, their steps run here one at a time
(the chain tests), their dswheels command lines, and their linters."""
