"""Failed jobs run again by failure class: preview, then execute."""
