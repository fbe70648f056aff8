"""What the tests share: real repositories, sessions, stores, servers. Imported as
`tests.support.<module>`, the one way; no test module is imported as a library."""
