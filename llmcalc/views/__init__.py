"""Views: compositions over the costs — compare, sweep, explain, validate, and the preset and GPU listings."""
