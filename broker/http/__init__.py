"""The broker's HTTP port: server.py serves it, guard.py decides which requests it takes,
login.py logs users in when the broker has an authorizer (auth.py: who a request is),
controls.py answers /faults and /nodes. It imports the console and the metrics; neither imports
it."""
