"""Korean date formats: Django's own put 오전/오후 after the clock ("10:00 오전"); Korean writes it first."""

DATETIME_FORMAT = "Y년 n월 j일 A g:i"
