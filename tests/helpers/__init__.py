"""Helpers shared by the tests of several stages (not tests themselves): import as ``from helpers.<module> import``
(``tests`` is on pytest's ``pythonpath``). ``nftest/`` holds nf-test's helper classes (nf-test.config ``libDir``)."""
