module github.com/eas-server/eas-server/engines/trees/bench

go 1.26.0

require (
	github.com/dmitryikh/leaves v0.0.0-20230708180554-25d19a787328
	github.com/eas-server/eas-server v0.0.0
)

replace github.com/eas-server/eas-server => ../../..
