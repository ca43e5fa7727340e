"""Reply text shaped for a platform: split to its limits, formatting rendered."""
