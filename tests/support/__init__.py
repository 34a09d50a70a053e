"""Helpers shared by the unit, integration and bench suites: real small wheels, loopback servers."""
