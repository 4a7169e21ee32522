#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    from config.settings import default_module

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", default_module())
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
