package main

// The leash command opens mysql:// store URLs (MySQL 8 and MariaDB 10.6+).
import _ "github.com/leash-go/leash/mysqlstore" // registers mysql://
