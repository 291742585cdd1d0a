"""How a command talks to the person who runs it: a progress line at least every 10 s, and one
way to stop on SIGINT or SIGTERM."""
