"""The broker's HTTP port: server.py serves it, guard.py decides which requests it takes,
auth.py logs users in when the broker has an authorizer, controls.py answers /faults and
/nodes. It imports the console and the metrics; neither imports it."""
