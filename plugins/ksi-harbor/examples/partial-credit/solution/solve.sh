#!/bin/bash
echo alpha > /app/a.txt
echo beta > /app/b.txt
