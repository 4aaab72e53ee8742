"""Built-in problem plugins (BST14 lower-bound instances and GLM baselines)."""
