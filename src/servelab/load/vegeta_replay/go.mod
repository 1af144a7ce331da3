module servelab/replay-sender

go 1.22
