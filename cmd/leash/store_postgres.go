package main

// The PostgreSQL store: importing it registers postgres:// and
// postgresql:// URLs.
import _ "github.com/leash-go/leash/pgstore"
