module github.com/leash-go/leash/reliability

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/leash-go/leash v0.0.0
	golang.org/x/sys v0.48.0
)

replace (
	github.com/leash-go/leash => ../
	github.com/leash-go/leash/redisstore => ../redisstore
)
