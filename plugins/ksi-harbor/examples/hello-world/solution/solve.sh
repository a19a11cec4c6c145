#!/bin/bash
printf 'Hello, world!' > hello.txt
